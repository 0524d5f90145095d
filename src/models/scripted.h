// --model path/to/net.pt: a TorchScript module (torch.jit.script or trace, then save), the
// compatibility path for torch versions before torch.export. TorchScript is deprecated upstream;
// a .pt2 program (models/imported.h) is the path that lasts.
#pragma once
#include <string>

#include "models/family.h"

namespace gputrain {

// The family of the TorchScript module at `path`, read once per process. Its models start from
// the module's weights and switch train/eval as the module does. A file that is not a TorchScript
// module (a gputrain checkpoint, a state_dict) is a usage error naming it.
const Family& scripted_family(const std::string& path);

}  // namespace gputrain
