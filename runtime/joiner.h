/* joiner.h - the joiner policies scope_join() waits by. */
#ifndef SC_JOINER_H
#define SC_JOINER_H

#include "rt.h"

/* Tells the scope's joiner that task ended in state (enum sc_task_state);
 * when the joiner decides to stop, the scope is cancelled (reason JOINER).
 * Called on the thread that ended the task, with no lock held. */
void sc_joiner_complete(scope_t *s, scope_task_t *task, int state);

/* scope_join()'s value once waiting ended normally (owner thread). */
int sc_joiner_result(scope_t *s);

/* scope_join()'s value when the deadline passed first: the config's
 * on_timeout, or -ETIMEDOUT (owner thread). */
int sc_joiner_timeout(scope_t *s);

#endif /* SC_JOINER_H */
