#include <inferwire/core/shape.hpp>

#include <catch2/catch.hpp>
