/* cmd.c - the table of control commands (their reply helpers are in
 * cmd_reply.c). */
#include "cmd.h"

#include <string.h>

/* Adding a command: one new cmd_<name>.c and one line here. */
static const struct cmd_entry *const table[] = {
    &cmd_status_entry, &cmd_list_entry,	     &cmd_tree_entry,	     &cmd_stacks_entry,
    &cmd_dump_entry,   &cmd_subscribe_entry, &cmd_unsubscribe_entry, &cmd_advise_entry,
};

const struct cmd_entry *cmd_find(const char *name)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (strcmp(table[i]->name, name) == 0)
			return table[i];
	return NULL;
}
