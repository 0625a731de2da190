// tests/torture/rejudge.cc — `baton_torture --judge-store DIR`: checker 10
// again on a kept run's directory (its worker logs and faults.log), so a
// rule of the judge can be checked against the runs that showed it a store
// overlap. The resource's writes are not kept, so only the overlaps and
// their classes are judged, not checker 10's violations.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "run.h"

namespace baton::torture {

namespace {

// One line of faults.log: "kind worker=W start_us end_us detail...".
std::vector<Fault> read_faults(const std::string& path) {
  std::vector<Fault> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    Fault f;
    std::string worker;
    if (!(ls >> f.kind >> worker >> f.start_us >> f.end_us)) continue;
    if (worker.rfind("worker=", 0) == 0) f.worker = std::stoi(worker.substr(7));
    std::getline(ls >> std::ws, f.detail);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

int judge_store_dir(const Options& o, const std::string& dir) {
  if (!std::filesystem::is_regular_file(dir + "/faults.log")) {
    std::cerr << "baton_torture: " << dir << " holds no faults.log\n";
    return 2;
  }
  std::vector<Op> ops;
  int bad = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 5 && name[0] == 'w' && name.ends_with(".log")) {
      auto v = read_ops(e.path().string(), &bad);
      ops.insert(ops.end(), v.begin(), v.end());
    }
  }
  const Judged j =
      check_store_exclusion(o, ops, {}, read_faults(dir + "/faults.log"));
  std::cout << dir << ":";
  for (const auto& [k, v] : j.counts) std::cout << " " << k << "=" << v;
  if (bad > 0) std::cout << " log_lines_unparsed=" << bad;
  std::cout << "\n";
  for (const auto& f : j.findings) std::cout << "  " << f.what << "\n";
  return 0;
}

}  // namespace baton::torture
