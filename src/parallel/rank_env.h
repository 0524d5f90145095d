// Where this process sits in a parallel job, read from the environment the way the field sets
// it: torchrun (and `gputrain launch`) export RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR and MASTER_PORT; Slurm's srun exports SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS,
// SLURM_TASKS_PER_NODE and SLURM_JOB_NODELIST. Torch-free: the launcher and the CLI use it too.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace gputrain {

struct RankEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // "torchrun" (RANK and WORLD_SIZE set, by torchrun or `gputrain launch`), "slurm", or ""
  // (one process, nothing set).
  std::string source = "";
  // torchrun's agent already serves the store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): rank 0 connects to it instead of starting a server.
  bool agent_store = false;
  // Which start of the job this is (TORCHELASTIC_RESTART_COUNT, SLURM_RESTART_COUNT; 0 for the
  // first): the store's keys are scoped by it, since torchrun's static rendezvous keeps one store
  // for every attempt, and a restarted job continues its run (--resume auto).
  int restart_count = 0;
  // Which job this process belongs to, the same in every start of it: "slurm job 123",
  // "torchrun job <run id>", or torchrun's agent ("torchrun agent 4567 on node7") when the run
  // id is torchrun's default "none". "" for one process started by hand. A restart continues
  // only a run folder its own job wrote.
  std::string job;
  // "rank 1 of 4 (local 1 of 2, node 0) from slurm, rendezvous n01:15123": where a rank thinks it is.
  std::string describe() const;
};

using GetEnv = std::function<const char*(const char*)>;

// Reads the variables; a value that is set but malformed (RANK=x, a world size of 0, a rank
// outside it, an unparsable node list) is a usage error naming the variable.
RankEnv read_rank_env(const GetEnv& getenv);
RankEnv read_rank_env();  // from the process's environment

// Slurm's compressed host lists: "n[01-04,07],gpu1" -> n01 n02 n03 n04 n07 gpu1 (zero padding
// kept). Throws std::invalid_argument on a malformed list.
std::vector<std::string> expand_hostlist(const std::string& list);

// Slurm's tasks per node: "2(x3),1" -> 2 2 2 1. Throws std::invalid_argument when malformed.
std::vector<int> expand_tasks_per_node(const std::string& list);

}  // namespace gputrain
