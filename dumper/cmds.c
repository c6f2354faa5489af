/* cmds.c - the table of scopecmd commands; adding a command is one new
 * cmd_<name>.c file and one line here. */
#include "cli.h"

extern const struct dcmd dcmd_help, dcmd_thread_print, dcmd_dump_to_file, dcmd_scope_tree,
    dcmd_runtime_info, dcmd_pool_advise;

const struct dcmd *const dcmd_table[] = {
    &dcmd_runtime_info,
    &dcmd_pool_advise,
    &dcmd_scope_tree,
    &dcmd_dump_to_file,
    &dcmd_thread_print,
    &dcmd_help,
    NULL,
};
