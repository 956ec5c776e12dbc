# Writes OUTPUT (#defines of NABU_VERSION and NABU_COMMIT) for `nabu --version`; run at every
# build, the file is replaced only when the commit changed, so only the file that includes it is
# compiled again.
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown (not built from a git checkout)")
endif()
file(WRITE "${OUTPUT}.tmp" "#define NABU_VERSION \"${VERSION}\"\n#define NABU_COMMIT \"${commit}\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
