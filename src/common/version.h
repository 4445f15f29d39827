// The build's version: `git describe --always --dirty` of the checkout it was built from
// (cmake/egg_version.cmake), "unknown" outside one. `egg --version` prints it, and every evaluation and bench
// row records it (versions.egg, a bench row's egg), so a published figure names the binary that made it.
#pragma once

namespace egg {

const char* EggVersion();

}  // namespace egg
