#include <inferwire/core/tensor_view.hpp>

#include <catch2/catch.hpp>
