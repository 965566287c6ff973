// File: cli/status_view.h
//
// The picture `migctl status` draws: every GPU as a row of memory slices, each
// instance a labelled block spanning its placement, so an operator sees at a
// glance what is used, what is kept for reuse and where the free space is.
// A pure function of migd's ListResponse and GetStatusResponse: no I/O, no
// terminal queries (the caller decides colour and width), so the exact layout
// is unit-tested.
//
// Example (8-slice GPU, width 80, no colour):
//   GPU 0  NVIDIA H100 80GB HBM3  GPU-0  MIG enabled  8 slices  81559 MiB
//      0        1        2        3        4        5        6        7
//     +-----------------------------------+--------+--------+-----------------+
//     |3g.40gb                            |1g.10gb |free    |2g.20gb          |
//     |Active                             |Idle    |        |foreign          |
//     |job-7                              |        |        |gi 5             |
//     +-----------------------------------+--------+--------+-----------------+
//     slices: 1 free, 1 idle, 4 active, 2 foreign; fragmentation 0.25
//
// Layout contract (what the tests pin down):
//  - A slice is `cell` columns wide, cell = clamp((width - 3) / slices, 5, 16);
//    slice s starts at column 2 + s * cell of a row. A block over [a, b) has
//    its left border '|' at slice a's column, its right border at slice b's
//    (shared with the next block) and (b - a) * cell - 1 columns of content.
//  - The ruler prints slice s's number right after slice s's border column.
//  - Each block has three label lines: profile, state, owner (pod owners as
//    namespace/name, opaque owners as given; Idle blocks their age with
//    RenderOptions::now_unix_ms; foreign blocks "gi N"); labels
//    longer than the block are cut and end in '~' (counting UTF-8 code
//    points); control characters become '?', so a label cannot inject
//    terminal escapes. Free slices are one block per slice labelled "free".
//  - With RenderOptions::color, block contents are wrapped in ANSI SGR codes
//    per state (Active green, Idle blue, Error red, Creating/Reclaiming/
//    Deleting yellow, foreign magenta, free dim) and the legend shows the
//    swatches; without it the output contains no escape character.
//  - Instances whose placement is outside the slice table or overlaps an
//    earlier block are not drawn in the row; they are listed under it
//    ("not drawn: ...") so nothing migd reports is hidden.
//  - A GPU the health monitor marked gets an "UNHEALTHY: <reason>" line under
//    its header; an unhealthy instance's state label ends in " UNHEALTHY".
//  - GPUs with MIG disabled get one line saying so and how to enable it.
//  - Instances whose GPU index is not among ListResponse.gpus are listed
//    after the GPUs ("instances on GPUs not listed:").
//  - Per-GPU totals come from GetStatusResponse (GpuStatus matched by GPU
//    index); a GPU missing there gets totals counted from the drawn blocks.
//
// Thread-safety: pure functions; safe to call concurrently.
#ifndef MIGD_CLI_STATUS_VIEW_H_
#define MIGD_CLI_STATUS_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "migd/v1/migd.pb.h"

namespace migd::cli {

struct RenderOptions {
  bool color = false;  // ANSI colours (the caller checks isatty and NO_COLOR)
  int width = 100;     // terminal columns available
  // Wall-clock now, Unix ms. When > 0, Idle blocks show how long ago they
  // were released ("idle 12m") on their owner line, which helps judge TTL
  // reclaims; 0 leaves that line empty (deterministic output).
  int64_t now_unix_ms = 0;
};

// The whole `migctl status` picture: a header (migd version, driver, GPU
// count), one section per GPU in ListResponse order, node totals and a legend.
std::string RenderStatus(const migd::v1::ListResponse& list,
                         const migd::v1::GetStatusResponse& status, const RenderOptions& options);

// Display label of an owner: "ns/name" for pods (container not shown),
// the opaque id otherwise, "" when unset.
std::string OwnerLabel(const migd::v1::Owner& owner);

// "Active", "Idle", "Creating", ... ("?" for UNSPECIFIED or unknown values).
std::string_view StateLabel(migd::v1::InstanceState state);

// A short age: "45s", "12m", "5h", "3d" (negative ages count as 0s).
std::string ShortAge(int64_t ms);

// `text` cut to at most `width` code points; a cut text ends in '~'.
// Counts UTF-8 code points so a multi-byte owner is never split mid-character.
std::string FitLabel(std::string_view text, size_t width);

}  // namespace migd::cli

#endif  // MIGD_CLI_STATUS_VIEW_H_
