#pragma once
// The diagnoser registry's parts (diagnose.h): each entry turns an OpCase into
// an Outcome; the numeric ones build the op's output under their hypothesis
// (Variants) and let judge() apply the rules of diagnose.h.
#include <string>
#include <vector>

#include "tessera/pipeline/diagnose.h"

namespace tessera::pipeline::diag {

// The op's output under one hypothesis ("positions off by +1").
struct Variant {
  std::string label;
  std::vector<float> out;
};

struct Outcome {
  bool reproduced = false;
  double distance = 0;            // mean_rel of the NPU output to the hypothesis (lower: closer)
  std::string detail, evidence;   // detail: which variant; evidence: the figures
  std::vector<std::string> tried; // variants that did not reproduce it
};

using TestFn = Outcome (*)(const OpCase&);

struct Entry {
  const char* name;
  std::vector<std::string> ops;  // "*": any op
  const char* hypothesis;        // what the experiment re-runs
  const char* cause;             // the cause it names when reproduced
  TestFn test;
  // Re-runs the op: needs the inputs and output the NPU had (a build error has none).
  bool numeric = true;
};

const std::vector<Entry>& registry();

// The oracle op (reference_ops.h) on owned inputs.
std::vector<float> reference(const kernels::OpShape& s, const std::vector<std::vector<float>>& in);
// The rules of diagnose.h over the variants; the closest reproducing one wins.
Outcome judge(const OpCase& c, const std::vector<Variant>& variants);

}  // namespace tessera::pipeline::diag
