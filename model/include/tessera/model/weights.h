#pragma once
// Weights of a model as named tensors, viewing mmap'd safetensors data.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tessera/core/tensor.h"
#include "tessera/model/config.h"
#include "tessera/model/tensor_table.h"

namespace tessera::model {

class Weights {
 public:
  Weights() = default;
  void add(const std::string& name, Tensor t);  // throws TensorError on duplicate
  bool contains(const std::string& name) const;
  // Throws TensorError naming the missing tensor.
  const Tensor& get(const std::string& name) const;
  const Tensor& get(const ModelConfig& c, WeightRole role, int layer = -1) const;
  std::vector<std::string> names() const;
  size_t size() const { return tensors_.size(); }
  // Every tensor_specs(c) entry present with the right shape and nothing else
  // (throws TensorError naming the missing/unexpected/mis-shaped tensor).
  void check_against(const ModelConfig& c) const;
  // Every element finite: one pass over the raw bits of every tensor (its
  // exponent field all ones is Inf or NaN in f32, bf16 and f16 alike).
  // Throws TensorError naming the first such tensor, the element's index and
  // value: a NaN in a weight must be refused at load, not surface later as a
  // kernel or gate failure, or as an empty generation.
  void check_finite(const std::string& where) const;

 private:
  std::map<std::string, Tensor> tensors_;
};

}  // namespace tessera::model
