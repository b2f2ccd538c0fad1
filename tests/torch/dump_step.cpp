// Writes everything the PyTorch comparison (compare_with_torch.py) checks: the initial weights
// under the seed's names, one batch, the dropout masks folio draws for it, the logits, the loss,
// every parameter gradient, the weights after one AdamW step (with clipping and the schedule's
// first learning rate) and each block's feed-forward pre-activations (for ReLU's kink).
//
//   folio_torch_dump --config NAME [--KEY=VALUE ...] --out DIR
//
// DIR/weights.safetensors is a folio checkpoint; DIR/expected.safetensors holds the rest.
#include <filesystem>
#include <iostream>

#include "cli/arguments.h"
#include "config/presets.h"
#include "core/error.h"
#include "core/text_format.h"
#include "data/batches.h"
#include "distributed/communicator.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/torch_names.h"
#include "model/gpt.h"
#include "optim/lr_schedule.h"
#include "train/training_step.h"

using namespace folio;

namespace {

// Masks of (B, T, T) per head and (B, T, C) per residual branch (and the embeddings', in main), as
// 1.0 for kept, 0.0 for dropped.
// Each is named "mask." and the dropout module's name in the PyTorch model (torch_names).
void add_masks(std::vector<NamedTensor>& out, const Config& c, const ModelShape& shape,
               const DropoutContext& dropout, int B, int T) {
  const int H = c.n_head, C = c.n_embd;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string prefix = "blocks." + std::to_string(l);
    const DropoutSpec weights = dropout.at(l, DropoutSite::kAttentionWeights);
    for (int h = 0; h < H; ++h) {
      NamedTensor mask{
          "mask." + torch_name(shape, prefix + ".sa.heads." + std::to_string(h) + ".dropout"),
          {B, T, T},
          {}};
      for (int b = 0; b < B; ++b)
        for (int i = 0; i < T; ++i)
          for (int j = 0; j < T; ++j)
            mask.values.push_back(weights.keeps(b, (uint64_t(h) * T + i) * T + j) ? 1.0f : 0.0f);
      out.push_back(std::move(mask));
    }
    for (auto [site, name] : {std::pair{DropoutSite::kAttentionOutput, ".sa.dropout"},
                              std::pair{DropoutSite::kFeedForwardOutput, ".ffwd.net.3"}}) {
      const DropoutSpec spec = dropout.at(l, site);
      NamedTensor mask{"mask." + torch_name(shape, prefix + name), {B, T, C}, {}};
      for (int b = 0; b < B; ++b)
        for (int e = 0; e < T * C; ++e) mask.values.push_back(spec.keeps(b, e) ? 1.0f : 0.0f);
      out.push_back(std::move(mask));
    }
  }
}

std::vector<NamedTensor> prefixed(const std::string& prefix, std::vector<NamedTensor> tensors) {
  for (NamedTensor& t : tensors) t.name = prefix + t.name;
  return tensors;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Arguments arguments(argc, argv, 1);
    const std::string out_dir = arguments.take("out").value_or("");
    Config c = load_config(arguments.take("config").value_or("shakespeare_char"));
    arguments.apply_config_keys(c, {"out", "config"}, "dump_step");
    arguments.finish("torch_dump", {"out", "config"});
    validate_config(c);
    if (out_dir.empty()) throw Error("--out DIR is required");
    std::filesystem::create_directories(out_dir);

    std::u32string symbols;
    for (char32_t ch = 32; ch < 32 + 65; ++ch) symbols.push_back(ch);
    const Vocabulary vocabulary = Vocabulary::from_text(symbols);
    const int V = vocabulary.size(), B = c.batch_size, T = c.block_size;

    // The CPU unless --device says otherwise (tests/gpu compares a GPU's dump with PyTorch).
    auto backend = make_backend(c.device == "auto" ? "cpu" : c.device, 0, {c.dtype, c.tf32});
    GPT model(*backend, ModelShape::from_config(c, V));
    model.initialize(c.seed, c.init_std, c.scaled_residual_init, init_scheme_of(c));
    save_checkpoint(out_dir + "/weights.safetensors", model, c, vocabulary, 0, 0, 0);

    // One step through the trainer's TrainingStep, read before its AdamW update too.
    LocalCommunicator one_process;
    TrainingStep training(model, c, one_process);
    if (training.split().global_windows() != B)
      throw Error("the dump holds one micro-batch: leave grad_accum at 1");
    training.draw_batches(0, [&](Batch& batch, uint32_t step, int64_t first_window) {
      fill_random_tokens(batch, c.seed, step, static_cast<uint32_t>(first_window), V);
    });
    const float loss = static_cast<float>(training.compute_gradients(0, /*measure_loss=*/true));
    const std::vector<float> gradients = model.read_gradients();
    // The masks TrainingStep drew for step 0 (its one micro-batch starts at window 0).
    const DropoutContext dropout = DropoutContext::of(c, 0, 0);
    const std::vector<int32_t>& inputs = training.micro_batch(0).inputs;
    const std::vector<int32_t>& targets = training.micro_batch(0).targets;
    // The backward pass replaced the logits with their gradient: the step's forward again, on the
    // same weights, batch and masks, gives them back (and the same hidden values).
    model.forward(inputs.data(), targets.data(), B, T, dropout);
    const std::vector<float> logits = model.read_logits();
    std::vector<std::vector<float>> preactivations;
    for (int l = 0; l < c.n_layer; ++l)
      preactivations.push_back(model.read_feed_forward_hidden(l));
    training.update(learning_rate_at(c, 0));

    std::vector<NamedTensor> out = {
        {"inputs", {B, T}, std::vector<float>(inputs.begin(), inputs.end())},
        {"targets", {B, T}, std::vector<float>(targets.begin(), targets.end())},
        {"logits", {B, T, V}, logits},
        {"loss", {1}, {loss}},
    };
    for (NamedTensor& t :
         prefixed("grad.", to_seed_state_dict(model.shape(), model.layout(), gradients)))
      out.push_back(std::move(t));
    for (NamedTensor& t : prefixed("updated.", to_seed_state_dict(model.shape(), model.layout(),
                                                                  model.read_parameters())))
      out.push_back(std::move(t));
    if (c.dropout > 0) add_masks(out, c, model.shape(), dropout, B, T);
    if (c.embedding_dropout > 0) {  // nanoGPT's drop(tok_emb + pos_emb), folio_torch.py's name
      const DropoutSpec spec = dropout.at_embedding();
      NamedTensor mask{"mask.embedding_dropout", {B, T, c.n_embd}, {}};
      for (int b = 0; b < B; ++b)
        for (int e = 0; e < T * c.n_embd; ++e) mask.values.push_back(spec.keeps(b, e) ? 1.0f : 0.0f);
      out.push_back(std::move(mask));
    }
    const int F = model.shape().hidden_width();
    for (int l = 0; l < c.n_layer; ++l)
      out.push_back({"preactivation.blocks." + std::to_string(l) + ".ffwd.net.0",
                     {B, T, F},
                     std::move(preactivations[l])});
    std::vector<TensorToWrite> tensors;
    for (const NamedTensor& t : out) tensors.push_back({t.name, t.shape, t.values.data()});
    write_safetensors(out_dir + "/expected.safetensors", tensors,
                      {{"learning_rate", shortest_double(learning_rate_at(c, 0))},
                       {"parameters", std::to_string(model.layout().saved_total())}});
    std::cout << "wrote " << out_dir << "\n";
    return 0;
  } catch (const Error& error) {
    std::cerr << "folio_torch_dump: " << error.what() << "\n";
    return 1;
  }
}
