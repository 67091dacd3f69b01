#pragma once
// report.html of a deployment: one self-contained page (inline CSS and SVG, no
// script, no external font or image) from the files in the directory:
// the gate table per phase (report.json), per-layer cosine against the oracle
// (phase3.json, evaluation.json), the per-dispatch timeline of one prefill and
// one decode call coloured by bounding term, a roofline of every dispatch
// against the spec's limits and the shares of the bounding terms
// (plan_final.txt parsed back, spec.json), the optimization trajectory
// (phase4/5.json) and the evaluator's verdict (evaluation.json). A part whose
// files are missing says so in place. The page is well-formed XML (XHTML).
#include <filesystem>
#include <string>

namespace tessera::pipeline {

std::string report_html(const std::filesystem::path& dir);
// Writes dir/report.html (temporary name, then renamed).
void write_report_html(const std::filesystem::path& dir);

}  // namespace tessera::pipeline
