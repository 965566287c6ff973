# Generated protobuf / gRPC code (protoc and grpc_cpp_plugin are found by the
# top-level CMakeLists.txt).
#
# migd_proto_library(NAME name PROTOS rel/path.proto ... [GRPC])
# Generated code is compiled without our warning flags.
# Callable from any directory: proto/ is the include root, generated code goes
# to <build>/gen/proto.
function(migd_proto_library)
  cmake_parse_arguments(ARG "GRPC" "NAME" "PROTOS" ${ARGN})
  set(MIGD_PROTO_SRC_DIR ${PROJECT_SOURCE_DIR}/proto)
  set(MIGD_PROTO_GEN_DIR ${CMAKE_BINARY_DIR}/gen/proto)
  file(MAKE_DIRECTORY ${MIGD_PROTO_GEN_DIR})
  set(srcs)
  foreach(proto ${ARG_PROTOS})
    string(REGEX REPLACE "\\.proto$" "" base ${proto})
    set(outs ${MIGD_PROTO_GEN_DIR}/${base}.pb.cc ${MIGD_PROTO_GEN_DIR}/${base}.pb.h)
    set(plugin_args)
    if(ARG_GRPC)
      list(APPEND outs ${MIGD_PROTO_GEN_DIR}/${base}.grpc.pb.cc ${MIGD_PROTO_GEN_DIR}/${base}.grpc.pb.h)
      set(plugin_args --grpc_out=${MIGD_PROTO_GEN_DIR} --plugin=protoc-gen-grpc=${MIGD_GRPC_CPP_PLUGIN})
    endif()
    add_custom_command(
      OUTPUT ${outs}
      COMMAND ${MIGD_PROTOC} -I${MIGD_PROTO_SRC_DIR} --cpp_out=${MIGD_PROTO_GEN_DIR} ${plugin_args}
              ${MIGD_PROTO_SRC_DIR}/${proto}
      DEPENDS ${MIGD_PROTO_SRC_DIR}/${proto}
      COMMENT "protoc ${proto}"
      VERBATIM)
    list(APPEND srcs ${outs})
  endforeach()
  add_library(${ARG_NAME} STATIC ${srcs})
  target_include_directories(${ARG_NAME} SYSTEM PUBLIC ${MIGD_PROTO_GEN_DIR})
  target_link_libraries(${ARG_NAME} PUBLIC PkgConfig::Protobuf)
  if(ARG_GRPC)
    target_link_libraries(${ARG_NAME} PUBLIC PkgConfig::GrpcPP)
  endif()
endfunction()
