import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request does not arrive in time: the head within `headTimeout` of the connection opening
/// or of the previous response's end, the body within `bodyTimeout` of the head. Sits after the HTTP decoder, so it sees
/// whole request parts; while a request is answered no deadline runs.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    private var deadline: Scheduled<Void>?
    /// A request whose head came and whose end has not.
    private var reading = false
    /// Requests whose head came and whose response has not ended (more than one when pipelined).
    private var answering = 0

    init(headTimeout: TimeAmount, bodyTimeout: TimeAmount) {
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        arm(headTimeout, context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            reading = true
            answering += 1
            arm(bodyTimeout, context: context)
        case .body: break
        case .end:
            reading = false
            deadline?.cancel()
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        answering = max(0, answering - 1)
        // The next head's deadline starts once the response has been written out, not when its end is queued: a player
        // still reading a segment's last bytes slowly must not have the connection closed under it.
        let written = context.eventLoop.makePromise(of: Void.self)
        if let promise { written.futureResult.cascade(to: promise) }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        written.futureResult.whenSuccess { _ in
            let handler = handler.value
            if handler.answering == 0, !handler.reading { handler.arm(handler.headTimeout, context: bound.value) }
        }
        context.write(data, promise: written)
    }

    private func arm(_ timeout: TimeAmount, context: ChannelHandlerContext) {
        deadline?.cancel()
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            loopBound.value.close(promise: nil)
        }
    }
}
