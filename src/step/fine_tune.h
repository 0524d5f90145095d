// Fine-tuning controls: which parameters train (--freeze, --unfreeze_at_epoch, --freeze_bn) and
// at what share of the learning rate (--layer_decay, --backbone_lr_scale).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "models/family.h"

namespace gputrain {

class Net;

// The parameter names --freeze selects in `model`: "backbone" is every one outside the family's
// head; otherwise each comma-separated prefix must name a module or parameter (a usage error
// lists the model's top-level names otherwise). Empty when --freeze is not given.
std::vector<std::string> frozen_parameters(const Net& model, const Family& f, const std::string& freeze);

// Freezes `names` (no gradient, so no optimizer state and no all-reduce for them) and, with
// `freeze_bn`, keeps the BatchNorm layers whose parameters are all frozen in eval mode, their
// running statistics as they are. An empty `names` unfreezes everything.
void set_frozen(Net& model, const std::vector<std::string>& names, bool freeze_bn);

// A parameter's learning-rate multiplier: timm's layer decay (--layer_decay, 0: off) over the
// family's layers (layer_ids: the last, with the head, at 1) times --backbone_lr_scale outside
// the head, for `model`'s parameters. Null when both are off.
using LrScale = std::function<double(const std::string& name)>;
LrScale lr_scale(double layer_decay, double backbone_lr_scale, const Family& f, const Net& model);

}  // namespace gputrain
