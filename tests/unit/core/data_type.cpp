#include <inferwire/core/data_type.hpp>

#include <catch2/catch.hpp>
