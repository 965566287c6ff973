// Linked into every migd executable of a ThreadSanitizer build (the `tsan`
// preset; cmake/migd.cmake adds it). TSan reads these hooks at startup, so
// the suppressions apply to child processes too (a test's migd), without
// TSAN_OPTIONS. What is suppressed and why: docs/reliability.md, "Sanitizers".
//
// Debian's gRPC, protobuf and abseil are not built with TSan: their atomics
// and locks are invisible to it, so a hand-off through them (a completion
// queue, a protobuf arena) has no happens-before edge and TSan reports the
// instrumented code on both sides. Those reports have the racing access in
// the libraries' inline header code or in generated *.pb.cc code, compiled
// into our binaries. Only the TOP frame is matched (race_top), so a race
// whose access is in migd's own code is still reported.
extern "C" const char* __tsan_default_suppressions();
extern "C" const char* __tsan_default_suppressions() {
  // called_from_lib: memory functions (memcpy, new/delete, sendmsg, ...)
  // that the uninstrumented libraries call are not checked. Each entry must
  // match exactly one loaded library, hence one per library ("libX.so."):
  // gRPC 1.51, protobuf 3.21, abseil 20220623 as Debian 12 ships them.
  return "called_from_lib:libabsl_bad_optional_access.so.\n"
         "called_from_lib:libabsl_bad_variant_access.so.\n"
         "called_from_lib:libabsl_base.so.\n"
         "called_from_lib:libabsl_city.so.\n"
         "called_from_lib:libabsl_civil_time.so.\n"
         "called_from_lib:libabsl_cord.so.\n"
         "called_from_lib:libabsl_cord_internal.so.\n"
         "called_from_lib:libabsl_cordz_functions.so.\n"
         "called_from_lib:libabsl_cordz_handle.so.\n"
         "called_from_lib:libabsl_cordz_info.so.\n"
         "called_from_lib:libabsl_debugging_internal.so.\n"
         "called_from_lib:libabsl_demangle_internal.so.\n"
         "called_from_lib:libabsl_exponential_biased.so.\n"
         "called_from_lib:libabsl_graphcycles_internal.so.\n"
         "called_from_lib:libabsl_hash.so.\n"
         "called_from_lib:libabsl_hashtablez_sampler.so.\n"
         "called_from_lib:libabsl_int128.so.\n"
         "called_from_lib:libabsl_log_severity.so.\n"
         "called_from_lib:libabsl_low_level_hash.so.\n"
         "called_from_lib:libabsl_malloc_internal.so.\n"
         "called_from_lib:libabsl_random_distributions.so.\n"
         "called_from_lib:libabsl_random_internal_platform.so.\n"
         "called_from_lib:libabsl_random_internal_pool_urbg.so.\n"
         "called_from_lib:libabsl_random_internal_randen.so.\n"
         "called_from_lib:libabsl_random_internal_randen_hwaes.so.\n"
         "called_from_lib:libabsl_random_internal_randen_hwaes_impl.so.\n"
         "called_from_lib:libabsl_random_internal_randen_slow.so.\n"
         "called_from_lib:libabsl_random_internal_seed_material.so.\n"
         "called_from_lib:libabsl_random_seed_gen_exception.so.\n"
         "called_from_lib:libabsl_random_seed_sequences.so.\n"
         "called_from_lib:libabsl_raw_hash_set.so.\n"
         "called_from_lib:libabsl_raw_logging_internal.so.\n"
         "called_from_lib:libabsl_spinlock_wait.so.\n"
         "called_from_lib:libabsl_stacktrace.so.\n"
         "called_from_lib:libabsl_status.so.\n"
         "called_from_lib:libabsl_statusor.so.\n"
         "called_from_lib:libabsl_str_format_internal.so.\n"
         "called_from_lib:libabsl_strerror.so.\n"
         "called_from_lib:libabsl_strings.so.\n"
         "called_from_lib:libabsl_strings_internal.so.\n"
         "called_from_lib:libabsl_symbolize.so.\n"
         "called_from_lib:libabsl_synchronization.so.\n"
         "called_from_lib:libabsl_throw_delegate.so.\n"
         "called_from_lib:libabsl_time.so.\n"
         "called_from_lib:libabsl_time_zone.so.\n"
         "called_from_lib:libaddress_sorting.so.\n"
         "called_from_lib:libcares.so.\n"
         "called_from_lib:libgpr.so.\n"
         "called_from_lib:libgrpc++.so.\n"
         "called_from_lib:libgrpc.so.\n"
         "called_from_lib:libprotobuf.so.\n"
         "called_from_lib:libre2.so.\n"
         "called_from_lib:libupb.so.\n"
         "race_top:/usr/include/grpcpp/\n"
         "race_top:/usr/include/grpc/\n"
         "race_top:/usr/include/google/protobuf/\n"
         "race_top:/usr/include/absl/\n"
         "race_top:.pb.cc\n"
         // gRPC's inline client code copies the status details out of a
         // buffer the library filled on its own thread (an absl::Cord).
         "race:grpc::internal::CallOpClientRecvStatus::FinishOp\n"
         // The same for the callback API's interceptor state (generic stubs).
         "race:grpc::internal::InterceptorBatchMethodsImpl\n"
         "race:grpc::internal::CallbackWithStatusTag\n"
         // spdlog is a compiled library too (SPDLOG_COMPILED_LIB): the
         // default logger is swapped inside it (InitLogging; tests call it
         // again while gRPC's long-lived threads exist), and our inline
         // logging code on those threads reads the new logger. (Not
         // called_from_lib: its inline lock_guards would then unlock mutexes
         // TSan never saw locked.)
         "race:spdlog::logger::should_log\n"
         "race:spdlog::logger::log_\n"
         // gRPC's internal threads (executor, timer) outlive main().
         "thread:grpc_core::Thread::Thread\n"
         "race_top:.pb.h\n";
}
