// Every built-in design builder, registered explicitly (see op_builder.cpp for
// why not by static initialisers). Anyone adding a builder appends its
// declaration and its call here, one line each.
namespace tessera::kernels {

void register_linear_builder();
void register_embedding_builder();
void register_argmax_builder();
void register_attention_prefill_builder();
void register_attention_decode_builder();
void register_rmsnorm_builder();
void register_head_rmsnorm_builder();
void register_rope_builder();
void register_bias_add_builder();
void register_silu_mul_builder();
void register_residual_add_builder();
void register_kv_append_builder();

void register_builtin_op_builders() {
  register_linear_builder();
  register_embedding_builder();
  register_argmax_builder();
  register_attention_prefill_builder();
  register_attention_decode_builder();
  register_rmsnorm_builder();
  register_head_rmsnorm_builder();
  register_rope_builder();
  register_bias_add_builder();
  register_silu_mul_builder();
  register_residual_add_builder();
  register_kv_append_builder();
}

}  // namespace tessera::kernels
