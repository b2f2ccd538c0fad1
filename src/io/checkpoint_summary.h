// What `folio info` says about a checkpoint: file, checksums, step and losses, the model's
// structure and the preset it matches, parameters by tensor group, vocabulary, the full config.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "io/checkpoint.h"

namespace folio {

struct ParameterGroup {
  std::string name;  // embeddings, attention, feed-forward, norms, head
  size_t count = 0;
};

// The parameters of the model by tensor group, in this order: embeddings (token and position
// tables), attention (fused qkv, proj), feed-forward (ffwd.net), norms (ln1, ln2, ln_f), head
// (lm_head: only its bias, or nothing, when it is tied to the token embedding).
std::vector<ParameterGroup> parameter_groups(const ModelShape& shape);

// The preset whose model and optimizer keys the config matches, with the keys that differ:
// "baby", "baby with max_iters = 500", or "none (closest: tiny, 9 keys differ)".
std::string matching_preset(const Config& config);

struct CheckpointSummary {
  const LoadedCheckpoint& checkpoint;
  std::string file_sha256;  // of the whole file, as sha256sum prints it
};

std::string summary_text(const CheckpointSummary& summary);
nlohmann::json summary_json(const CheckpointSummary& summary);

}  // namespace folio
