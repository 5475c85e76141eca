// Error bodies: the four transfer errors are the spec's; the others (401, 429, invalid page,
// missing User-Agent, unknown route) are "not shown" there and take the same shape.
import type { ErrorBody } from './types.ts';

export const errorBody = (error: string, message: string): ErrorBody => ({ success: false, error, message });

export const bodies = {
  unauthorized: () => errorBody('Unauthorized', 'Invalid or missing access token'),
  forbidden: () => errorBody('Unauthorized', 'Caller lacks permission to transfer this learner'),
  notFound: (id: string | number) => errorBody('Learner not found', `No learner exists with ID ${id}`),
  alreadyInOrg: () =>
    errorBody('Invalid request', "Learner is already associated with the caller's organization"),
  transferFailed: () =>
    errorBody('Transfer failed', 'An error occurred during the transfer; retry or contact support'),
  tooManyRequests: (message: string) => errorBody('Too Many Requests', message),
  badRequest: (message: string) => errorBody('Invalid request', message),
  routeNotFound: (method: string, path: string) =>
    errorBody('Not Found', `Route ${method} ${path} not found`),
  internal: () => errorBody('Internal Server Error', 'An unexpected error occurred'),
};
