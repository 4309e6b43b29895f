// Choosing each conv2d's form per binding: cuDNN or the direct library kernel, whichever is faster
// on the binding's shapes. Why: neither wins everywhere (cuDNN's NCHW kernels run a 16-bit depthwise
// 7x7 several times slower than the direct kernel, which loses badly on dense convs), and the
// shapes are only known at bind time.
#include <algorithm>
#include <memory>

#include "runtime/cuda/cuda_executable_internal.h"

namespace kiln::cuda {

void CudaExecutable::choose_conv_forms(Binding& b) {
  if (b.conv_forms_chosen) return;
  b.conv_forms_chosen = true;
  std::vector<StepPlan> all;
  all.swap(b.steps);
  size_t timing = all.size();  // the step moved into b.steps while it is timed
  try {
    for (size_t i = 0; i < all.size(); ++i) {
      StepPlan& plan = all[i];
      if (!plan.conv || plan.library_launches.empty()) continue;
      if (!options.time_conv_forms) {
        plan.library_launches.clear();
        continue;
      }
      // Time into a scratch output: the planned buffer may share arena memory with a value that is
      // live before the conv runs (this happens ahead of the binding's first real run).
      const Value* root = lowered->schedule.buffer_of(lowered->steps[i].node->outputs[0]);
      DeviceTensor scratch = DeviceTensor::empty(root->type.dtype, eval_shape(root->type.shape, b.dims), *stream_);
      const bool had_external = b.external.count(root) > 0;
      const DevicePtr saved = had_external ? b.external[root] : 0;
      b.external[root] = scratch.data();
      b.steps.push_back(std::move(plan));
      timing = i;
      auto median_ms = [&] {
        enqueue(b);  // warm-up (cuDNN's and the module's lazy set-up)
        std::vector<float> ms;
        for (int rep = 0; rep < 3; ++rep) {
          Event start(true), stop(true);
          start.record(*stream_);
          enqueue(b);
          stop.record(*stream_);
          stop.synchronize();
          ms.push_back(stop.elapsed_ms_since(start));
        }
        std::sort(ms.begin(), ms.end());
        return ms[1];
      };
      const float cudnn_ms = median_ms();
      std::unique_ptr<CudnnConv> cudnn = std::move(b.steps[0].conv);
      const float direct_ms = median_ms();
      StepPlan& timed = b.steps[0];
      if (cudnn_ms <= direct_ms) {
        timed.conv = std::move(cudnn);
        timed.library_launches.clear();
      } else {
        timed.conv_workspace = DeviceTensor();
        timed.buffers.pop_back();  // cuDNN's output operand (plan_library_kernel)
      }
      plan = std::move(timed);
      b.steps.clear();
      timing = all.size();
      if (had_external) b.external[root] = saved;
      else b.external.erase(root);
    }
  } catch (...) {
    if (timing < all.size() && !b.steps.empty()) all[timing] = std::move(b.steps[0]);
    b.steps.swap(all);
    throw;
  }
  b.steps.swap(all);
}

}  // namespace kiln::cuda
