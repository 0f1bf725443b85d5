# Shared by the CLI test scripts (cmake -P): a counting check() and check_finish(), which
# fails the script when any check failed and removes the scratch directory WORK otherwise.
set(passed 0)
set(failed 0)

# cond: the if() arguments as a list ("rc;EQUAL;0"); paths must not hold ';'.
macro(check cond what)
  if(${cond})
    math(EXPR passed "${passed} + 1")
  else()
    message(SEND_ERROR "FAIL: ${what}")
    math(EXPR failed "${failed} + 1")
  endif()
endmacro()

macro(check_finish)
  if(failed GREATER 0)
    message(FATAL_ERROR "${passed} passed, ${failed} failed")
  endif()
  file(REMOVE_RECURSE "${WORK}")
  message(STATUS "${passed} passed, ${failed} failed")
endmacro()
