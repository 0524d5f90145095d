// `gputrain consolidate` (consolidate.h).
#include "train/consolidate.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "train/checkpoint_file.h"
#include "train/shard_checkpoint.h"

namespace gputrain {

std::string consolidate_checkpoint(const std::string& in, const std::string& out) {
  CheckpointData c = read_checkpoint_file(in);
  const bool sharded = !c.optimizer.shards.empty();
  try {
    c.optimizer = consolidated_state(c.optimizer, in, c.model);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw usage_error(fmt::format("checkpoint '{}' cannot be consolidated: {}", in, e.what()), kDamagedCheckpointHint);
  }
  c.optimizer.shards.clear();
  if (std::filesystem::is_directory(out))
    throw usage_error(fmt::format("consolidate: '{}' is a folder", out), "give the file to write, e.g. whole.pt");
  AtomicFile file(out);
  write_checkpoint(c, [&file](const void* data, size_t size) { return file.write(data, size); });
  file.commit();
  return sharded ? fmt::format("wrote {}: step {}, the optimizer state of {} parameters gathered from its shard files",
                               out, c.meta.step, c.optimizer.state.size())
                 : fmt::format("wrote {}: step {} (it was not sharded: copied as it is)", out, c.meta.step);
}

}  // namespace gputrain
