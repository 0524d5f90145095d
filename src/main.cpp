// gputrain entry point: argv -> command table -> exit code. Errors become messages, not crashes.
#include "cli/commands.h"

int main(int argc, char** argv) { return gputrain::run_cli(argc, argv); }
