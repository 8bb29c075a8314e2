// A RocketMQ 4.9.4 client's TLS, as NettyRemotingClient builds it, asking one route.
//
// TlsHelper.buildSslContext(forClient=true) with tls.test.mode.enable=false:
// SslContextBuilder.forClient().sslProvider(SslProvider.JDK), trustManager(trustCertPath)
// when tls.client.authServer=true (InsecureTrustManagerFactory otherwise), keyManager with
// the client's certificate and key when given; the handler comes from
// sslContext.newHandler(alloc): no SNI, no host name check, no ALPN. Frames are
// RocketMQ's: int32 length, int32 header length (serialize type 0, JSON), header, body.
//
// Usage: java -cp netty-all.jar:. TlsRouteQuery HOST PORT TOPIC AUTH_SERVER TRUST_CERT
//        [CLIENT_CERT CLIENT_KEY]
// Prints "protocol=<TLS version>", then "code=<n>" and "body=<json>" of the answer, or
// "failed=<exception>" and exits 2 when the handshake or the exchange fails.
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslHandler;
import io.netty.handler.ssl.SslProvider;
import io.netty.handler.ssl.util.InsecureTrustManagerFactory;
import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

public final class TlsRouteQuery {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        String topic = args[2];
        boolean authServer = Boolean.parseBoolean(args[3]);
        SslContextBuilder builder = SslContextBuilder.forClient().sslProvider(SslProvider.JDK);
        if (!authServer) {
            builder.trustManager(InsecureTrustManagerFactory.INSTANCE);
        } else {
            builder.trustManager(new File(args[4]));
        }
        if (args.length > 6) {
            builder.keyManager(new File(args[5]), new File(args[6]));
        }
        SslContext context = builder.build();
        CompletableFuture<String> answer = new CompletableFuture<>();
        NioEventLoopGroup group = new NioEventLoopGroup(1);
        try {
            Channel channel = new Bootstrap().group(group).channel(NioSocketChannel.class)
                .handler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addFirst("sslHandler", context.newHandler(ch.alloc()));
                        ch.pipeline().addLast(new LengthFieldBasedFrameDecoder(16777216, 0, 4, 0, 4));
                        ch.pipeline().addLast(new SimpleChannelInboundHandler<ByteBuf>() {
                            @Override
                            protected void channelRead0(ChannelHandlerContext ctx, ByteBuf frame) {
                                int headerLength = frame.readInt() & 0xFFFFFF;
                                byte[] header = new byte[headerLength];
                                frame.readBytes(header);
                                byte[] body = new byte[frame.readableBytes()];
                                frame.readBytes(body);
                                answer.complete(new String(header, StandardCharsets.UTF_8)
                                    + "\n" + new String(body, StandardCharsets.UTF_8));
                            }

                            @Override
                            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                answer.completeExceptionally(cause);
                                ctx.close();
                            }

                            @Override
                            public void channelInactive(ChannelHandlerContext ctx) {
                                answer.completeExceptionally(new IllegalStateException("closed"));
                            }
                        });
                    }
                }).connect(host, port).sync().channel();
            SslHandler ssl = (SslHandler) channel.pipeline().get("sslHandler");
            ssl.handshakeFuture().await(10, TimeUnit.SECONDS);
            if (!ssl.handshakeFuture().isSuccess()) {
                throw new IllegalStateException("handshake: " + ssl.handshakeFuture().cause());
            }
            System.out.println("protocol=" + ssl.engine().getSession().getProtocol());
            String json = "{\"code\":105,\"extFields\":{\"topic\":\"" + topic + "\"},\"flag\":0,"
                + "\"language\":\"JAVA\",\"opaque\":1,\"serializeTypeCurrentRPC\":\"JSON\","
                + "\"version\":401}";
            byte[] header = json.getBytes(StandardCharsets.UTF_8);
            ByteBuf frame = channel.alloc().buffer();
            frame.writeInt(4 + header.length).writeInt(header.length).writeBytes(header);
            channel.writeAndFlush(frame);
            String[] parts = answer.get(10, TimeUnit.SECONDS).split("\n", 2);
            String code = parts[0].replaceAll(".*\"code\":(-?[0-9]+).*", "$1");
            System.out.println("code=" + code);
            System.out.println("body=" + parts[1]);
            channel.close().sync();
        } catch (Exception e) {
            System.out.println("failed=" + e);
            System.exit(2);
        } finally {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }
}
