#include "nabu/core/progress.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "nabu/core/logging.h"

namespace nabu {

void ProgressReporter::update(std::size_t done) {
  double elapsed = seconds_since(start_);
  if (ended_ || (done < total_ && elapsed - last_ < 5.0)) return;
  ended_ = done >= total_;
  last_ = elapsed;
  double rate = done / std::max(elapsed, 1e-9);
  logger().info("{}: {}/{} {} ({:.0f}%), {:.1f} {}/s, ETA {}", what_, done, total_, unit_,
               100.0 * done / std::max<std::size_t>(total_, 1), rate, unit_,
               format_duration(rate > 0 ? (total_ - done) / rate : 0.0));
}

}  // namespace nabu
