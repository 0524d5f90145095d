// For tests that build a Trainer without a Session. The Trainer reads the run's Recipe by
// reference (a fallback changes its precision mid-run), so a test's recipes are kept here,
// alive until the process ends.
#pragma once
#include <deque>

#include "core/recipe.h"
#include "step/optimizer.h"
#include "train/optimizer_spec.h"

namespace gputrain::test {

inline Recipe& keep(Recipe r) {
  static std::deque<Recipe> recipes;  // a deque: a new recipe does not move the others
  recipes.push_back(std::move(r));
  return recipes.back();
}

}  // namespace gputrain::test
