// What a resume changes in the run it continues: flags given now, the data, the samples per step.
// Nothing changes silently: each change is said in the resume line and kept in config.json's
// history ({"step", "epoch", "flags", "data", "schema", "steps"}), which every checkpoint carries on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/checkpoint.h"
#include "train/fit.h"

namespace gputrain {

struct ResumeChanges {
  std::vector<std::string> said;                    // "--lr 0.003 -> 0.01", as the resume line prints them
  nlohmann::json kept = nlohmann::json::object();  // the history entry's parts

  // The history entry at `at` (null when nothing changed).
  nlohmann::json entry(const CheckpointMeta& at) const;
};

// Requested values that differ between the recorded run (`was`, its record's requested half) and
// this one (`now`); where the run goes (output_dir), this command's own switches and `skip` are
// not compared.
void compare_flags(const nlohmann::json& was, const nlohmann::json& now, ResumeChanges& out,
                   const std::string& skip = "");

// The data fingerprints (data/data_fingerprint.h) of the recorded run and this one. Another
// number of training samples moves every later epoch's order and the position's meaning: a usage
// error naming `checkpoint`, unless `allow`. A changed file is said.
void compare_data(const nlohmann::json& was, const nlohmann::json& now, bool allow, const std::string& checkpoint,
                  ResumeChanges& out);

// The sample schemas (data/schema.h) of the recorded run and this one: a changed field is said.
void compare_schema(const nlohmann::json& was, const nlohmann::json& now, ResumeChanges& out);

// How this run takes an epoch in steps.
struct StepGeometry {
  int64_t steps_per_epoch, micro_batches_per_epoch, global_batch, accumulation;
  int64_t samples_per_step() const { return global_batch * accumulation; }
};

// The step position counted from the position in the epoch: the epochs before it, plus this
// epoch's steps less those its remaining micro-batches make. Another batch size, accumulation or
// data size moves it, so that the run's epochs and its learning-rate schedule (laid over steps)
// end together over the remaining samples; unchanged settings give the checkpoint's own step.
// `was_per_step`: the recorded run's samples per step, for the line that says so.
void recount_steps(const StepGeometry& now, int64_t was_per_step, CheckpointMeta& at, ResumeChanges& out);

}  // namespace gputrain
