// Precompiled header for the torch-using targets: parsing torch.h once saves minutes per build.
#pragma once
#include <torch/torch.h>
