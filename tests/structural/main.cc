// main.cc: one program holding every case of tests/structural (one translation unit, so the
// cases run in the order of the files below and of their lines). See run.sh.
#include "harness.h"

#include "cases_json.cc"
#include "cases_structural.cc"
#include "cases_serialization.cc"
#include "cases_visit.cc"
#include "cases_mutate.cc"

int main() {
  st::RegisterTypes();
  return harness::RunAll();
}
