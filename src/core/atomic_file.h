// Durable file replacement: a crash leaves either the old file or the new one, never a torn one.
#pragma once
#include <string>

namespace gputrain {

// Flushes a written file to the disk (no-op when it cannot be opened).
void fsync_file(const std::string& path);

// Renames the fully written and fsynced `tmp` over `path`, then fsyncs the folder so the
// rename itself survives a power cut.
void rename_durably(const std::string& tmp, const std::string& path);

}  // namespace gputrain
