// --model path/to/net.pt2: a network defined in Python and saved with torch.export.save, trained
// as a model family built from the file (its graph run by models/exported_graph.h).
#pragma once
#include <string>

#include "models/family.h"

namespace gputrain {

// The family of the program at `path`, read and compiled once per process. Its models start
// from the file's weights. Evaluation runs `<stem>.eval.pt2` beside it when there is one (a
// program exported from model.eval()), else the training graph with batch_norm and dropout in
// eval mode. A bad file is a usage error naming it.
const Family& imported_family(const std::string& path);

// One line on how the family at `path` evaluates, for the session's report.
std::string imported_eval_note(const std::string& path);

}  // namespace gputrain
