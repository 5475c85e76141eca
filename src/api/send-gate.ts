// The last check before a call's first byte is written (decision 14): a process stalled after
// its permit check could send a call the limiter no longer counts in flight. undici asks the
// handler right before it writes (onRequestStart); a gate that refuses aborts the request
// unwritten.
import { DecoratorHandler, type Dispatcher } from 'undici';

/** Returns the error to abort with when the call may no longer be sent, else undefined. */
export type SendGate = () => Error | undefined;

/** The gate of each call, found by the call's abort signal (each call has its own). */
const gates = new WeakMap<AbortSignal, SendGate>();

export function gateCall(signal: AbortSignal, gate: SendGate): void {
  gates.set(signal, gate);
}

class GatedHandler extends DecoratorHandler {
  readonly #gate: SendGate;

  constructor(handler: Dispatcher.DispatchHandler, gate: SendGate) {
    super(handler);
    this.#gate = gate;
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    const refusal = this.#gate();
    if (refusal) {
      controller.abort(refusal);
      return;
    }
    (DecoratorHandler.prototype as Dispatcher.DispatchHandler).onRequestStart?.call(
      this,
      controller,
      context,
    );
  }
}

/** The interceptor: calls without a gate pass as they are. */
export const sendGate: Dispatcher.DispatcherComposeInterceptor = (dispatch) => (opts, handler) => {
  // The request options reach the interceptor as they were given, the call's own signal with them.
  const signal = (opts as { signal?: unknown }).signal;
  const gate = signal instanceof AbortSignal ? gates.get(signal) : undefined;
  return dispatch(opts, gate ? new GatedHandler(handler, gate) : handler);
};
