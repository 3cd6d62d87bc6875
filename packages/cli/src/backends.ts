/**
 * Registers every backend package with core's registry (importing a backend
 * package registers it). The CLI and the tests import this one module.
 */
import '@sparq/reference';
import '@sparq/native';
