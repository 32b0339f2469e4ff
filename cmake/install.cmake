# Installation rules (headers, library, CMake package, pkg-config).
