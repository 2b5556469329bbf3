// MpiCommunicator under a real `mpirun`. ctest runs this binary as a plain,
// single-process gtest program; each test launches
//   timeout 60 mpirun --allow-run-as-root --oversubscribe -np W -x SRKIT_MPI_WORKER=<scenario>
//   <this binary>
// and checks the job's exit status and output. With SRKIT_MPI_WORKER set, main()
// runs that scenario on the rank instead of the tests (comm_mpi_worker.h).
//
// Why our own main(): the test CMake links GTest::gtest_main, a static archive
// (libgtest_main.a) whose only member defines main. The linker pulls an archive
// member only to resolve an undefined symbol, and main is already defined here,
// so gtest_main's main is never linked in (with a shared gtest_main the
// executable's own main would win as well). This keeps the worker in one
// explicit place instead of a static initialiser that starts MPI before main.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <string>

#include "tests/mpi/comm_mpi_worker.h"

namespace {

struct JobResult {
  int exit_code = -1;  // of `timeout mpirun ...`; 124: the safety timeout fired
  std::string output;  // stdout and stderr of all ranks
};

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

std::string self_path() {
  char path[4096];
  const ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
  if (len <= 0) return "";
  path[len] = '\0';
  return path;
}

// The 60 s bound only keeps a broken build from hanging ctest; it is not a
// performance check (every scenario finishes in a few seconds).
JobResult run_job(int ranks, const std::string& scenario) {
  const std::string cmd = "timeout 60 mpirun --allow-run-as-root --oversubscribe -np " +
                          std::to_string(ranks) + " -x SRKIT_MPI_WORKER=" + scenario + " '" +
                          self_path() + "' 2>&1";
  JobResult result;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return result;
  char chunk[4096];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) result.output.append(chunk, got);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

#define SKIP_WITHOUT_MPIRUN() \
  if (!have_mpirun()) GTEST_SKIP() << "mpirun is not on PATH (install openmpi-bin)"

// All ranks pass every check and report the same hash of everything they received.
void expect_collectives_pass(int ranks) {
  const JobResult job = run_job(ranks, "collectives");
  ASSERT_NE(job.exit_code, 124) << "job hung:\n" << job.output;
  EXPECT_EQ(job.exit_code, 0) << job.output;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(count_of(job.output, "[rank " + std::to_string(r) + "] OK collectives"), 1)
        << job.output;
  }
  const std::regex result_line("RESULT rank=(\\d+) hash=([0-9a-f]{16})");
  std::set<std::string> ranks_seen, hashes;
  for (auto it = std::sregex_iterator(job.output.begin(), job.output.end(), result_line);
       it != std::sregex_iterator(); ++it) {
    ranks_seen.insert((*it)[1]);
    hashes.insert((*it)[2]);
  }
  EXPECT_EQ(ranks_seen.size(), size_t(ranks)) << job.output;
  EXPECT_EQ(hashes.size(), 1u) << "ranks ended with different bits:\n" << job.output;
}

TEST(MpiCommunicator, CollectivesOnTwoRanks) {
  SKIP_WITHOUT_MPIRUN();
  expect_collectives_pass(2);
}

// Three ranks: addition order matters (the scenario checks its inputs show it),
// blocks are uneven, and 1/3 is inexact.
TEST(MpiCommunicator, CollectivesOnThreeRanks) {
  SKIP_WITHOUT_MPIRUN();
  expect_collectives_pass(3);
}

TEST(MpiCommunicator, CheckSameNamesTheFirstDifferingRank) {
  SKIP_WITHOUT_MPIRUN();
  const JobResult job = run_job(2, "check_same_differs");
  ASSERT_NE(job.exit_code, 124) << "job hung:\n" << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  // The same one-line message on both ranks.
  const std::string message = "srkit: model differs between ranks: rank 1 differs from rank 0";
  EXPECT_EQ(count_of(job.output, "[rank 0] caught: " + message), 1) << job.output;
  EXPECT_EQ(count_of(job.output, "[rank 1] caught: " + message), 1) << job.output;
  EXPECT_NE(job.output.find("at byte 12 (rank 0 has \"2}\" there)"), std::string::npos)
      << job.output;
}

TEST(MpiCommunicator, TimeoutNamesTheSilentRankAndFailsTheJob) {
  SKIP_WITHOUT_MPIRUN();
  const JobResult job = run_job(2, "timeout");
  ASSERT_NE(job.exit_code, 124) << "the 2 s collective timeout did not end the job:\n"
                                << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_EQ(count_of(job.output, "srkit: all_reduce timed out after 2 s waiting for rank 1\n"), 1)
      << job.output;
  EXPECT_EQ(job.output.find("returned without rank 1"), std::string::npos) << job.output;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv("SRKIT_MPI_WORKER")) {
    return srkit::mpi_test::run_worker(scenario);
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
