// The operators a graph from a file may call: those whose only effects are on their tensors. A
// .pt2 program is data, so what it names must not reach files, the console or the process's
// global state, however the file was made.
#pragma once
#include <cstddef>
#include <string>

namespace c10 {
struct FunctionSchema;
struct OperatorName;
}  // namespace c10

namespace gputrain {

// Why an operator with this schema may not run in a graph from a file: "another namespace",
// "takes a file name", ...; "" when it may.
std::string op_refusal(const c10::FunctionSchema& schema);

// Whether `name` is on the allowlist: every operator registered with the c10 dispatcher whose
// schema op_refusal() admits, listed once per process.
bool op_admitted(const c10::OperatorName& name);

// The allowlist's size (schemas, overloads counted apart), for the tests and the README.
size_t admitted_op_count();

}  // namespace gputrain
