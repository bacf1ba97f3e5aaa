// The roles of a parameter-server training cluster (cluster_spec.h), as tarn-train runs
// them:
//
//   ps:     builds the model only to learn its parameter sizes, takes its share of the
//           ShardPlan and serves it (ParameterServer) until `stop` is set.
//   worker: reads its shard of the training data (every trainer count-th image, from its
//           rank), and loops pull -> forward/backward -> push until the epochs are done or
//           the global step reaches max_steps.
//   chief:  a worker that also initialises the servers' parameters (from the newest
//           checkpoint in checkpoint_dir when there is one, else from the model built with
//           the seed, or loaded), checkpoints (parameters, optimiser state, step and its
//           own data position) and evaluates on the test split and exports a version as
//           LocalTrainingOptions says. A restarted chief resumes its data position from
//           the newest checkpoint.
//
// This header is free of libtorch. Both calls block; they use the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "train/cluster_spec.h"
#include "train/local_trainer.h"

namespace tarn::train {

struct DistributedOptions {
  // Model, data, optimiser (what the servers apply), epochs, max_steps, batch, threads;
  // the chief's exports and checkpoints.
  LocalTrainingOptions training;
  ClusterSpec cluster;
  bool sync = false;
  int backup_workers = 0;
  std::string bind_ip;    // where a ps listens ($TARN_IP); "": every address
  int metrics_port = -1;  // a ps serves GET /metrics here (0: any port; -1: none)
  // The assembly's secret ($TARN_ASSEMBLY_SECRET): a ps admits only connections that prove
  // they hold it, and workers prove it (ps_wire.h). "": a ps admits anyone.
  std::string secret;
};

Status RunParameterServerTask(const DistributedOptions& options, const std::atomic<bool>& stop);

// A chief's or worker's run. Once `stop` is set (SIGTERM: tarn stopping it, for a stop, a
// flex or a preemption) it finishes the step it is in; the chief then writes a checkpoint
// of the current step (with --checkpoint_dir) and both return with `stopped` set, the
// chief's `checkpoint_step` naming what a restart resumes from.
struct WorkerTaskResult {
  LocalTrainingResult training;
  bool stopped = false;
  int64_t checkpoint_step = -1;  // -1: none written on the way out
};
StatusOr<WorkerTaskResult> RunWorkerTask(const DistributedOptions& options,
                                         const std::atomic<bool>* stop = nullptr);

}  // namespace tarn::train
