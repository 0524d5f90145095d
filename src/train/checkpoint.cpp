// Checkpoints written atomically (temporary file, fsync, rename, fsync of the folder).
#include "train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include <torch/serialize.h>

#include "core/error.h"

namespace gputrain {
namespace {

void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void save_checkpoint(const std::string& path, Trainer& trainer, const CheckpointMeta& meta) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model, optimizer;
  trainer.model().save(model);
  trainer.optimizer().save(optimizer);
  archive.write("model", model);
  archive.write("optimizer", optimizer);
  trainer.scaler().save(archive);
  archive.write("meta.format", c10::IValue(std::string("gputrain-checkpoint-1")));
  archive.write("meta.epoch", c10::IValue(meta.epoch));
  archive.write("meta.step", c10::IValue(meta.step));
  archive.write("meta.config", c10::IValue(meta.config_json));

  const std::string tmp = path + ".tmp";
  archive.save_to(tmp);
  fsync_path(tmp, O_RDONLY);
  std::filesystem::rename(tmp, path);
  fsync_path(std::filesystem::path(path).parent_path().string(), O_RDONLY | O_DIRECTORY);
}

CheckpointMeta load_checkpoint(const std::string& path, Trainer& trainer) {
  if (!std::filesystem::exists(path))
    throw usage_error("checkpoint '" + path + "' does not exist");
  CheckpointMeta meta;
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path, trainer.context().device);
    c10::IValue format, epoch, step, config;
    if (!archive.try_read("meta.format", format) || format.toStringRef() != "gputrain-checkpoint-1")
      throw usage_error("checkpoint '" + path + "' was not written by gputrain (no gputrain format tag)");
    archive.read("meta.epoch", epoch);
    archive.read("meta.step", step);
    archive.read("meta.config", config);
    torch::serialize::InputArchive model, optimizer;
    archive.read("model", model);
    archive.read("optimizer", optimizer);
    trainer.model().load(model);
    trainer.optimizer().load(optimizer);
    trainer.scaler().load(archive);
    meta.epoch = epoch.toInt();
    meta.step = step.toInt();
    meta.config_json = config.toStringRef();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw usage_error("checkpoint '" + path + "' cannot be loaded: " + what.substr(0, what.find('\n')),
                      "the file is truncated, corrupt, or from a different model/optimizer");
  }
  return meta;
}

}  // namespace gputrain
