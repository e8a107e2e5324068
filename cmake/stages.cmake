# The core's pipeline stages, one static library each, and the rule that keeps them layered.
#
# Every header is included from the csrc/ root ("ir/graph.h"), so one include directory would let
# any file include any other. Instead each stage compiles against its own view: a directory under
# the build tree holding a symbolic link per stage it may see (itself and the stages below it in
# LUMINAL_STAGE_DEPS_*). An include of any other stage fails with "No such file or directory".
#
# To add a stage: append it to LUMINAL_STAGES after everything it uses and set its
# LUMINAL_STAGE_DEPS_<stage> (direct dependencies; the ones below them follow). Generated files
# (an embedded .cuh) join a stage through LUMINAL_STAGE_EXTRA_SOURCES_<stage> and
# LUMINAL_STAGE_EXTRA_INCLUDES_<stage>, set before luminal_add_core. A stage whose
# folder holds no .cpp file yet (csrc/schedule/ while it is headers only, or absent) becomes an
# INTERFACE library, so its dependents still see its headers.

# In dependency order.
set(LUMINAL_STAGES common pt2 ir frontend passes schedule codegen runtime)
set(LUMINAL_STAGE_DEPS_common "")
set(LUMINAL_STAGE_DEPS_pt2 common)
set(LUMINAL_STAGE_DEPS_ir common)
set(LUMINAL_STAGE_DEPS_frontend pt2 ir)
set(LUMINAL_STAGE_DEPS_passes ir)
set(LUMINAL_STAGE_DEPS_schedule passes)
set(LUMINAL_STAGE_DEPS_codegen schedule)
set(LUMINAL_STAGE_DEPS_runtime codegen frontend)

set(LUMINAL_CSRC_DIR ${CMAKE_CURRENT_LIST_DIR}/../csrc)
get_filename_component(LUMINAL_CSRC_DIR ${LUMINAL_CSRC_DIR} ABSOLUTE)
set(LUMINAL_STAGE_VIEWS_DIR ${CMAKE_BINARY_DIR}/stage_include)

# `stage` and every stage below it, each once.
function(luminal_stage_closure out stage)
  set(closure ${stage})
  foreach(dep IN LISTS LUMINAL_STAGE_DEPS_${stage})
    luminal_stage_closure(below ${dep})
    list(APPEND closure ${below})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set(${out} ${closure} PARENT_SCOPE)
endfunction()

# The include directory of `stage`: links to the folders of the stages it may include.
function(luminal_stage_view out stage)
  set(view ${LUMINAL_STAGE_VIEWS_DIR}/${stage})
  file(MAKE_DIRECTORY ${view})
  file(GLOB stale LIST_DIRECTORIES true ${view}/*)
  foreach(link IN LISTS stale)
    file(REMOVE ${link})  # the link, not what it points to
  endforeach()
  luminal_stage_closure(visible ${stage})
  foreach(seen IN LISTS visible)
    if(IS_DIRECTORY ${LUMINAL_CSRC_DIR}/${seen})
      file(CREATE_LINK ${LUMINAL_CSRC_DIR}/${seen} ${view}/${seen} SYMBOLIC)
    endif()
  endforeach()
  set(${out} ${view} PARENT_SCOPE)
endfunction()

function(luminal_stage_sources out stage with_cuda)
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${LUMINAL_CSRC_DIR}/${stage}/*.cpp)
  if(NOT with_cuda)
    # Without the toolkit's headers the CUDA engine is left out; the CPU engine still builds.
    list(FILTER sources EXCLUDE REGEX "/runtime/cuda/")
  endif()
  set(${out} ${sources} PARENT_SCOPE)
endfunction()

# luminal_add_core(<name> WITH_CUDA <bool> [OPTIONS <compile options>...] [DEFINITIONS <defs>...])
# Builds every stage as <name>_<stage> with the given options, and <name>: an INTERFACE library
# linking them all with the whole csrc/ include root, for what sits above the stages (unit tests,
# fuzz entry, the Python extension). Called once per flavour of the core (default, torch's libstdc++
# ABI, fuzz instrumentation).
function(luminal_add_core name)
  cmake_parse_arguments(ARG "" "WITH_CUDA" "OPTIONS;DEFINITIONS" ${ARGN})
  set(definitions ${ARG_DEFINITIONS})
  if(ARG_WITH_CUDA)
    list(APPEND definitions LUMINAL_HAVE_CUDA=1)
  endif()
  add_library(${name} INTERFACE)
  target_include_directories(${name} INTERFACE ${LUMINAL_CSRC_DIR})
  target_link_libraries(${name} INTERFACE nlohmann_json::nlohmann_json)
  target_compile_definitions(${name} INTERFACE ${definitions})
  if(ARG_WITH_CUDA)
    target_include_directories(${name} INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
  endif()
  foreach(stage IN LISTS LUMINAL_STAGES)
    set(target ${name}_${stage})
    luminal_stage_sources(sources ${stage} "${ARG_WITH_CUDA}")
    list(APPEND sources ${LUMINAL_STAGE_EXTRA_SOURCES_${stage}})
    luminal_stage_view(view ${stage})
    if(sources)
      add_library(${target} STATIC ${sources})
      set(scope PRIVATE)
      target_compile_options(${target} PRIVATE ${ARG_OPTIONS})
    else()
      add_library(${target} INTERFACE)
      set(scope INTERFACE)
    endif()
    target_include_directories(${target} ${scope} ${view} ${LUMINAL_STAGE_EXTRA_INCLUDES_${stage}})
    target_compile_definitions(${target} ${scope} ${definitions})
    target_link_libraries(${target} ${scope} nlohmann_json::nlohmann_json)
    foreach(dep IN LISTS LUMINAL_STAGE_DEPS_${stage})
      target_link_libraries(${target} ${scope} ${name}_${dep})
    endforeach()
    if(ARG_WITH_CUDA)
      target_include_directories(${target} ${scope} ${CUDAToolkit_INCLUDE_DIRS})
    endif()
    target_link_libraries(${name} INTERFACE ${target})
  endforeach()
  # Third-party libraries, where they are used.
  target_link_libraries(${name}_runtime PRIVATE ${CMAKE_DL_LIBS})
endfunction()

# ctest stage_layering: every stage can include the headers of the stages it depends on and no
# others (cmake/check_stage_layering.cmake). Call after luminal_add_core, with testing enabled.
function(luminal_add_stage_layering_test)
  set(manifest ${CMAKE_BINARY_DIR}/stage_layering_manifest.cmake)
  set(text "set(STAGES ${LUMINAL_STAGES})\nset(CSRC_DIR ${LUMINAL_CSRC_DIR})\nset(VIEWS_DIR ${LUMINAL_STAGE_VIEWS_DIR})\n")
  foreach(stage IN LISTS LUMINAL_STAGES)
    luminal_stage_closure(visible ${stage})
    string(APPEND text "set(VISIBLE_${stage} ${visible})\n")
  endforeach()
  file(WRITE ${manifest} "${text}")
  add_test(NAME stage_layering
           COMMAND ${CMAKE_COMMAND} -DLAYERING_MANIFEST=${manifest} -DCOMPILER=${CMAKE_CXX_COMPILER}
                   -DWORK_DIR=${CMAKE_BINARY_DIR}/stage_layering -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/check_stage_layering.cmake)
endfunction()
