#include "cli/checkpoint_session.h"

namespace folio {

CheckpointSession open_checkpoint(const std::string& checkpoint_path, const std::string& data_path,
                                  const Config& base_config) {
  CheckpointSession session;
  if (!data_path.empty()) session.data = load_text_dataset(data_path, base_config.train_fraction);
  session.checkpoint = load_checkpoint(checkpoint_path, base_config,
                                       session.data ? &session.data->vocabulary : nullptr);
  if (session.data &&
      session.data->vocabulary.symbols() != session.checkpoint.vocabulary.symbols()) {
    // Encode the text with the model's own vocabulary (a character it lacks is an error).
    session.data = load_text_dataset(data_path, session.checkpoint.config.train_fraction,
                                     &session.checkpoint.vocabulary);
  }
  session.backend =
      make_backend(base_config.device, base_config.threads, {base_config.dtype, base_config.tf32});
  session.model = std::make_unique<GPT>(*session.backend, session.checkpoint.shape);
  session.model->write_parameters(session.checkpoint.parameters);
  return session;
}

}  // namespace folio
