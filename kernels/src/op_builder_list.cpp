// Every built-in design builder, registered explicitly (see op_builder.cpp for
// why not by static initialisers). Anyone adding a builder appends its
// declaration and its call here, one line each.
namespace tessera::kernels {

void register_linear_builder();
void register_embedding_builder();
void register_argmax_builder();

void register_builtin_op_builders() {
  register_linear_builder();
  register_embedding_builder();
  register_argmax_builder();
}

}  // namespace tessera::kernels
