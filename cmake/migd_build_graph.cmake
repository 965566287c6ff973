# The build graph as data, for the build_graph_check test (tests/build_graph/).
#
# migd_write_build_graph(<file>) writes, at generate time, one record per
# target of the project (a line of tab-separated fields):
#
#   target   <name> <TYPE> <MIGD_ROLE or -> <source dir, relative> <binary dir> <artifact or ->
#   links    <name> <direct link item>...     (the target's LINK_LIBRARIES)
#   sources  <name> <source file>...
#
# The checker joins these with the link lines the generator wrote for migd and
# migctl (build.ninja, or link.txt for Makefiles), so a bad edge is caught
# whether it comes from a DEPS list, a target_link_libraries() or a raw flag.

function(migd_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    migd_collect_targets(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(migd_write_build_graph output)
  migd_collect_targets(${PROJECT_SOURCE_DIR} targets)
  set(tab "\t")
  set(content "")
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(role ${t} MIGD_ROLE)
    if(NOT role)
      set(role "-")
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    get_target_property(bin ${t} BINARY_DIR)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${dir})
    set(artifact "-")
    if(NOT type STREQUAL "OBJECT_LIBRARY")
      set(artifact "$<TARGET_FILE:${t}>")
    endif()
    string(APPEND content
      "target${tab}${t}${tab}${type}${tab}${role}${tab}${rel}${tab}${bin}${tab}${artifact}\n"
      "links${tab}${t}${tab}$<JOIN:$<TARGET_PROPERTY:${t},LINK_LIBRARIES>,${tab}>\n"
      "sources${tab}${t}${tab}$<JOIN:$<TARGET_PROPERTY:${t},SOURCES>,${tab}>\n")
  endforeach()
  file(GENERATE OUTPUT ${output} CONTENT "${content}")
endfunction()
