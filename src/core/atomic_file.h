// Durable file replacement: a crash leaves either the old file or the new one, never a torn one.
#pragma once
#include <string>

namespace gputrain {

// Flushes a written file to the disk (no-op when it cannot be opened).
void fsync_file(const std::string& path);

// Renames the fully written and fsynced `tmp` over `path`, then fsyncs the folder so the
// rename itself survives a power cut.
void rename_durably(const std::string& tmp, const std::string& path);

// Writes `text` to `path` atomically: a temporary file beside it, fsync, rename_durably. A
// failure is a runtime error naming the path and the system's reason; `path` is then unchanged.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace gputrain
