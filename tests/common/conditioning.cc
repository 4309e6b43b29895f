// The reference's sensitivity to a nudge of its float inputs (conditioning.h).
#include "common/conditioning.h"

#include "common/compare.h"
#include "kiln/error.h"
#include "kiln/interp.h"

namespace kiln::testing {

bool ill_conditioned(const Graph& g, const std::vector<HostTensor>& inputs, const std::vector<HostTensor>& want,
                     size_t output, const std::function<double(DType)>& nudge) {
  std::vector<HostTensor> nudged;
  for (const HostTensor& t : inputs) {
    HostTensor c = t.clone();
    if (c.is_tensor() && is_float(c.dtype()))
      for (int64_t i = 0; i < c.numel(); i += 2) c.set_f64(i, c.get_f64(i) * (1 + nudge(c.dtype())));
    nudged.push_back(std::move(c));
  }
  try {
    return !compare_tensors(interp::run(g, nudged).at(output), want.at(output)).empty();
  } catch (const Error&) {
    return true;  // the nudge made the reference refuse the inputs: as sensitive as can be
  }
}

}  // namespace kiln::testing
