// HookList: every hook of a list at each point of the step (step_hooks.h).
#include "step/step_hooks.h"

#include <algorithm>

namespace gputrain {

void HookList::inputs(int64_t step, std::vector<Batch>& micro) {
  for (auto& h : hooks_) h->inputs(step, micro);
}
void HookList::begin(int64_t step) {
  for (auto& h : hooks_) h->begin(step);
}
torch::Tensor HookList::step_total(torch::Tensor count) {
  for (auto& h : hooks_) count = h->step_total(std::move(count));
  return count;
}

void HookList::before_forward(const Batch& b) {
  for (auto& h : hooks_) h->before_forward(b);
}
void HookList::before_last_backward() {
  for (auto& h : hooks_) h->before_last_backward();
}
void HookList::before_batch_backward() {
  for (auto& h : hooks_) h->before_batch_backward();
}
torch::Tensor HookList::scaled(torch::Tensor loss) {
  for (auto& h : hooks_) loss = h->scaled(std::move(loss));
  return loss;
}
void HookList::after_backward() {
  for (auto& h : hooks_) h->after_backward();
}
void HookList::before_update(int64_t step) {
  for (auto& h : hooks_) h->before_update(step);
}
torch::Tensor HookList::skip_update(const torch::Tensor& loss) {
  torch::Tensor skip;
  for (auto& h : hooks_)
    if (auto s = h->skip_update(loss); s.defined()) skip = skip.defined() ? torch::maximum(skip, s) : s;
  return skip;
}
void HookList::end() {
  for (auto it = hooks_.rbegin(); it != hooks_.rend(); ++it) (*it)->end();
}
void HookList::trainable_changed() {
  for (auto& h : hooks_) h->trainable_changed();
}
bool HookList::can_retry() const {
  return std::all_of(hooks_.begin(), hooks_.end(), [](const auto& h) { return h->can_retry(); });
}
void HookList::state(StepState& out) const {
  for (const auto& h : hooks_) h->state(out);
}
void HookList::load_state(const StepState& in) {
  for (auto& h : hooks_) h->load_state(in);
}

}  // namespace gputrain
