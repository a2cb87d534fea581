// Triton kernels are embedded as comments in /tmp/runs/index_from_bucketize.2/cache/6857d14e58/inductor/ch2uy44wqmttrf432ahoitwnyi645lahuhljnpn2qnghmvvx5dyf/cfzz7pjex5j2zicmb5uz7okzu4p2ef6uqlvaw345p3immrol7kkf.wrapper.cpp

#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  cpp_fused_embedding_sum_0(const int64_t* in_ptr0,
                       const float* in_ptr1,
                       float* out_ptr0)
{
    std::atomic<int> inductor_cpu_integer_div_error{0};
    inductor_cpu_integer_div_error_flag = &inductor_cpu_integer_div_error;
    {
        #pragma GCC ivdep
        for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(4L); x0+=static_cast<int64_t>(1L))
        {
            {
                float tmp_acc0 = 0;
                at::vec::Vectorized<float> tmp_acc0_vec = at::vec::Vectorized<float>(0);
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(32L); x1+=static_cast<int64_t>(16L))
                {
                    {
                        if(C10_LIKELY(x1 >= static_cast<int64_t>(0) && x1 < static_cast<int64_t>(32L)))
                        {
                            auto tmp0 = at::vec::VectorizedN<int64_t,2>::loadu(in_ptr0 + static_cast<int64_t>(x1), static_cast<int64_t>(16));
                            auto tmp1 =
                            [&]
                            {
                                __at_align__ std::array<int64_t, 16> tmpbuf;
                                tmp0.store(tmpbuf.data(), static_cast<int64_t>(16));
                                return tmpbuf;
                            }
                            ()
                            ;
                            auto tmp2 =
                            [&]
                            {
                                __at_align__ std::array<int64_t, 16> tmpbuf;
                                #pragma GCC unroll 16
                                for (long x1_inner = 0; x1_inner < static_cast<int64_t>(16); x1_inner++)
                                {
                                    tmpbuf[x1_inner] = static_cast<int64_t>(tmp1[x1_inner]);
                                }
                                return at::vec::VectorizedN<int64_t,2>::loadu(tmpbuf.data(), static_cast<int64_t>(16));
                            }
                            ()
                            ;
                            AOTI_TORCH_CHECK((at::vec::VecMask<int64_t,2>((at::vec::VectorizedN<int64_t,2>(0) <= tmp2) & (tmp2 < at::vec::VectorizedN<int64_t,2>(9L)))).all_masked(), "index out of bounds: 0 <= tmp2 < 9L");
                            auto tmp4 =
                            [&]
                            {
                                __at_align__ std::array<float, 16> tmpbuf;
                                #pragma GCC unroll 16
                                for (long x1_inner = 0; x1_inner < static_cast<int64_t>(16); x1_inner++)
                                {
                                    tmpbuf[x1_inner] = in_ptr1[static_cast<int64_t>(x0 + 4L*tmp1[x1_inner])];
                                }
                                return at::vec::Vectorized<float>::loadu(tmpbuf.data(), static_cast<int64_t>(16));
                            }
                            ()
                            ;
                            tmp_acc0_vec = tmp_acc0_vec + tmp4;
                        }
                    }
                }
                tmp_acc0 = tmp_acc0 + at::vec::vec_reduce_all<float, 1>([](at::vec::Vectorized<float>& x, at::vec::Vectorized<float>& y) { return x + y; }, tmp_acc0_vec);
                out_ptr0[static_cast<int64_t>(x0)] = static_cast<float>(tmp_acc0);
            }
        }
    }
    inductor_cpu_integer_div_error_flag = nullptr;
    inductor_cpu_throw_if_integer_div_error(inductor_cpu_integer_div_error);
}

