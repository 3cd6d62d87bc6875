/**
 * @sparq/native: the C++ backend. Importing this module registers it as
 * backend 'native' (priority 100); it initialises only if the addon built.
 */
import { BackendUnavailableError, registerBackend } from '@sparq/core';

registerBackend(
  'native',
  () => {
    throw new BackendUnavailableError('native addon is not implemented yet (issue 4)');
  },
  100,
);
