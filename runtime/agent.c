/* agent.c - placeholder for the reporting agent (issue 3 replaces it). */
#include "event.h"

void sc_agent_init(void)
{
}
