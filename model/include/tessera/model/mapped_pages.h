#pragma once
// Giving mapped weight pages back. A model larger than what the machine holds
// beside everything else is read a part at a time: once a phase is done with
// a mapped tensor, its pages leave the process's resident set (MADV_DONTNEED
// on a read-only file mapping only unmaps them; they stay in the page cache
// and fault back in when read again). Only bytes inside a file mapping made by
// the model readers (safetensors, GGUF) are released: on owned memory the
// same call would zero the bytes, so anything else is left alone.
#include "tessera/core/tensor.h"
#include "tessera/model/weights.h"

namespace tessera::model {

void release_mapped_pages(const Tensor& t);
void release_mapped_pages(const Weights& w);  // every tensor of w

}  // namespace tessera::model
