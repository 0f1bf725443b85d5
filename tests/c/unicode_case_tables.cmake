# Regenerates src/tokenizer/unicode_case_tables.h with tools/gen_unicode_case.mjs from the Unicode
# Character Database and checks that the committed file is identical (the table is data that
# must stay reproducible). Prints "SKIPPED:" when node or the UCD (/usr/share/unicode, Debian's
# unicode-data; or WASMLM_UCD) is missing. Variables: SRC (repository root), WORK.
find_program(NODE node)
set(ucd "$ENV{WASMLM_UCD}")
if(ucd STREQUAL "")
  set(ucd /usr/share/unicode)
endif()
if(NOT NODE OR NOT EXISTS "${ucd}/UnicodeData.txt")
  message("SKIPPED: needs node and the UCD in ${ucd}")
  return()
endif()
execute_process(COMMAND ${NODE} ${SRC}/tools/gen_unicode_case.mjs ${ucd}
                OUTPUT_FILE ${WORK}/unicode_case_tables.h RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tools/gen_unicode_case.mjs failed: ${rc}")
endif()
file(READ ${WORK}/unicode_case_tables.h fresh)
file(READ ${SRC}/src/tokenizer/unicode_case_tables.h committed)
if(NOT fresh STREQUAL committed)
  message(FATAL_ERROR "src/tokenizer/unicode_case_tables.h differs from what tools/gen_unicode_case.mjs "
                      "writes from ${ucd}: regenerate it")
endif()
message(STATUS "unicode_case_tables.h is current")
